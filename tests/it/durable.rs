//! Durable runs on a store: the journal, exactly-once resumes, decisions bound to what a person
//! was shown, and recovery after an interruption at every journal boundary. The databases'
//! own conformance is in `store_backend`; these tests run on `MemoryStore` (the same journal
//! layer every backend shares) and, where noted, on SQLite.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{
    AuditFilter, LoadedRun, MemoryStore, PendingFilter, RunFilter, RunStore, SqliteStore,
    StoredStatus,
};
use phaseo_agent::{
    Agent, AgentError, Decision, Decisions, Model, ModelResponse, PendingKind, RunStatus,
    ScriptedModel, StoreError, Tool, ToolCall,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use crate::support::durable::{ByPosition, Hooked};

/// The side effects a tool had, counted outside the run: (call id, idempotency key) per run of
/// its code.
#[derive(Clone, Default)]
struct Effects(Arc<Mutex<Vec<(String, String)>>>);

impl Effects {
    fn of(&self, call_id: &str) -> Vec<String> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(id, _)| id == call_id)
            .map(|(_, key)| key.clone())
            .collect()
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn effect_tool(name: &str, effects: &Effects) -> Tool {
    let effects = effects.clone();
    Tool::new(
        name,
        "Has a side effect",
        json!({"type": "object"}),
        move |input, ctx| {
            effects
                .0
                .lock()
                .unwrap()
                .push((ctx.tool_call().id.clone(), ctx.idempotency_key()));
            Ok(json!({"done": input}))
        },
    )
}

fn release_agent(model: impl Model + 'static, effects: &Effects) -> Agent {
    Agent::builder("release")
        .model(model)
        .tool(effect_tool("deploy", effects).require_approval())
        .tool(effect_tool("notify", effects))
        .tool(effect_tool("sync", effects).idempotent(true))
        .build()
        .unwrap()
}

/// The lease of a process that dies in a test: short, so that the run can be taken up soon
/// after, as a crashed process's run is once its lease expires.
const DEAD_LEASE: Duration = Duration::from_millis(100);

/// Counts the `warn` events of the store's durable-run service.
struct CountWarnings(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target() == "phaseo_agent::durable::runs" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_paused_run_is_listed_resumed_once_and_loads_as_the_loop_left_it() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .tool_call("call_1", "deploy", json!({"env": "staging"}))
            .text("Deployed.");
        let runs = Runs::new(MemoryStore::new());
        let agent = runs.attach(release_agent(model, &effects));

        let paused = agent.run("Deploy staging").await.unwrap();
        assert_eq!(paused.status(), RunStatus::WaitingForHuman);
        let stored = runs.load(paused.state.run_id()).await.unwrap();
        assert_eq!(stored.state.to_json(), paused.state.to_json());
        assert_eq!(stored.status, StoredStatus::Paused);
        let waiting = runs.pending(&PendingFilter::default()).await.unwrap();
        assert_eq!(waiting.items.len(), 1);
        assert_eq!(waiting.items[0].tool, "deploy");
        assert_eq!(waiting.items[0].kind, "tool_approval");
        assert_eq!(waiting.items[0].arguments, r#"{"env":"staging"}"#);

        let run_id = paused.state.run_id();
        let approve = || Decisions::for_run(run_id).approve("call_1");
        let done = agent
            .resume(run_id)
            .decisions(approve())
            .at(stored.version)
            .by("ada")
            .await
            .unwrap();
        assert_eq!(done.output(), Some("Deployed."));
        // The same version again: refused, naming the run and the version; nothing ran.
        let again = agent
            .resume(run_id)
            .decisions(approve())
            .at(stored.version)
            .by("bob")
            .await
            .unwrap_err();
        match &again.error {
            AgentError::Store(StoreError::Conflict {
                run_id: id,
                expected,
                ..
            }) => assert_eq!((id.as_str(), *expected), (run_id, stored.version)),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(effects.of("call_1").len(), 1);

        let loaded = runs.load(run_id).await.unwrap();
        assert_eq!(loaded.state.to_json(), done.state.to_json());
        assert_eq!(loaded.status, StoredStatus::Completed);
        assert!(
            runs.pending(&PendingFilter::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        let audit = runs.audit(&AuditFilter::default()).await.unwrap();
        assert_eq!(audit.items.len(), 1);
        assert_eq!(
            (audit.items[0].by.as_str(), audit.items[0].call_id.as_str()),
            ("ada", "call_1")
        );
    });
}

#[test]
fn decisions_are_bound_to_the_arguments_shown_and_recorded_once() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .tool_calls([
                ToolCall::new("call_1", "deploy", json!({"env": "staging"})),
                ToolCall::new("call_2", "deploy", json!({"env": "production"})),
            ])
            .text("Done.");
        let runs = Runs::new(MemoryStore::new());
        let agent = runs.attach(release_agent(model, &effects));
        let paused = agent.run("Deploy both").await.unwrap();
        let run_id = paused.state.run_id();
        let waiting = runs.pending(&PendingFilter::default()).await.unwrap().items;
        let row = |id: &str| waiting.iter().find(|p| p.call_id == id).unwrap().clone();

        // Shown other arguments: refused, nothing recorded.
        let mut forged = row("call_1");
        forged.digest = row("call_2").digest;
        let refused = runs
            .decide(&forged, Decision::Approve, "eve")
            .await
            .unwrap_err();
        assert!(
            matches!(refused, AgentError::Store(StoreError::StaleDecision { .. })),
            "{refused}"
        );
        // Shown at another version of the run (a stale page): refused too.
        let mut stale = row("call_1");
        stale.version -= 1;
        let refused = runs
            .decide(&stale, Decision::Approve, "eve")
            .await
            .unwrap_err();
        assert!(
            refused.to_string().contains("changed since it was shown"),
            "{refused}"
        );

        runs.decide(&row("call_1"), Decision::Approve, "ada")
            .await
            .unwrap();
        // A second person on the same call: exactly one decision stands.
        let second = runs
            .decide(
                &row("call_1"),
                Decision::Reject {
                    message: "no".into(),
                },
                "bob",
            )
            .await
            .unwrap_err();
        assert!(
            second.to_string().contains("already decided by ada"),
            "{second}"
        );

        // Not every call decided yet: nothing runs.
        let early = agent.resume(run_id).await.unwrap_err();
        assert!(matches!(early.error, AgentError::MissingDecision { .. }));
        assert_eq!(effects.count(), 0);

        runs.decide(
            &row("call_2"),
            Decision::Reject {
                message: "freeze".into(),
            },
            "bob",
        )
        .await
        .unwrap();
        let undecided = PendingFilter {
            undecided_only: true,
            ..PendingFilter::default()
        };
        assert!(runs.pending(&undecided).await.unwrap().items.is_empty());
        let done = agent.resume(run_id).await.unwrap();
        assert_eq!(done.output(), Some("Done."));
        assert_eq!(effects.of("call_1").len(), 1);
        assert!(effects.of("call_2").is_empty());
        let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
        let who: Vec<_> = audit
            .iter()
            .map(|d| (d.call_id.as_str(), d.by.as_str()))
            .collect();
        assert_eq!(who, [("call_1", "ada"), ("call_2", "bob")]);
        // A resume again of what was decided: the run is not paused any more.
        assert!(agent.resume(run_id).await.is_err());
        assert_eq!(effects.of("call_1").len(), 1);
    });
}

#[test]
fn a_refused_resume_leaves_the_run_waiting() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .tool_call("call_1", "deploy", json!({}))
            .text("Done.");
        let runs = Runs::new(MemoryStore::new());
        let agent = runs.attach(release_agent(model, &effects));
        let paused = agent.run("Deploy").await.unwrap();
        let run_id = paused.state.run_id();
        let version = runs.load(run_id).await.unwrap().version;
        let refused = agent
            .resume(run_id)
            .decisions(Decisions::for_run(run_id))
            .at(version)
            .by("ada")
            .await
            .unwrap_err();
        assert!(matches!(refused.error, AgentError::MissingDecision { .. }));
        let stored = runs.load(run_id).await.unwrap();
        assert_eq!(stored.status, StoredStatus::Paused);
        assert_eq!(stored.state.to_json(), paused.state.to_json());
        assert_eq!(stored.pending.len(), 1);
        let done = agent
            .resume(run_id)
            .decisions(Decisions::for_run(run_id).approve("call_1"))
            .at(stored.version)
            .by("ada")
            .await
            .unwrap();
        assert_eq!(done.output(), Some("Done."));
    });
}

/// A run with a plain call, an idempotent call, then a gated call, then an answer.
fn script() -> Arc<ByPosition> {
    Arc::new(ByPosition(vec![
        ModelResponse::tool_calls([
            ToolCall::new("call_1", "notify", json!({"to": "ops"})),
            ToolCall::new("call_2", "sync", json!({"repo": "web"})),
        ]),
        ModelResponse::tool_calls([ToolCall::new("call_3", "deploy", json!({"env": "staging"}))]),
        ModelResponse::text("All done."),
    ]))
}

/// Interrupts the run after `budget` journal writes, recovers it on the same store, and drives
/// it to the end, deciding what a person would. Returns the effects and the final status.
async fn interrupted_at(budget: usize) -> (Effects, StoredStatus, usize) {
    let effects = Effects::default();
    let memory = Arc::new(MemoryStore::new());
    let dying = Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), budget)))
        .snapshot_every(2)
        .lease(DEAD_LEASE);
    let model = script();
    let first = dying.attach(release_agent(model.clone(), &effects));
    let ran = first.run("Ship it").run_id("run_x").await;
    // The dead process's lease runs out before anyone may take the run up.
    tokio::time::sleep(DEAD_LEASE * 2).await;
    let runs = Runs::from_arc(memory.clone()).snapshot_every(2);
    let agent = runs.attach(release_agent(model, &effects));
    let Ok(mut stored) = runs.load("run_x").await else {
        // Died before the run was stored: nothing ran.
        assert!(ran.is_err());
        assert_eq!(effects.count(), 0);
        return (effects, StoredStatus::Failed, 0);
    };
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 10, "the run never settled");
        match stored.status {
            StoredStatus::Running => {
                agent
                    .recover("run_x")
                    .await
                    .map(|_| ())
                    .or_else(|e| if e.state.is_some() { Ok(()) } else { Err(e) })
                    .unwrap();
            }
            StoredStatus::Paused | StoredStatus::InDoubt => {
                let mut decisions = Decisions::for_run("run_x");
                for p in &stored.state.pending().to_vec() {
                    decisions = match p.kind {
                        PendingKind::OutcomeUnknown => {
                            decisions.output(&p.call.id, json!("done before the crash"))
                        }
                        _ => decisions.approve(&p.call.id),
                    };
                }
                agent
                    .resume("run_x")
                    .decisions(decisions)
                    .at(stored.version)
                    .by("ops")
                    .await
                    .unwrap();
            }
            status => return (effects, status, rounds),
        }
        stored = runs.load("run_x").await.unwrap();
    }
}

#[test]
fn an_interruption_at_every_journal_boundary_loses_nothing_and_runs_nothing_twice() {
    block(async {
        // How many writes a whole run takes, uninterrupted.
        let (clean, status, _) = interrupted_at(usize::MAX).await;
        assert_eq!(status, StoredStatus::Completed);
        assert_eq!(clean.count(), 3);
        for budget in 0..40 {
            let (effects, status, _) = interrupted_at(budget).await;
            if budget == 0 {
                continue;
            }
            assert_eq!(
                status,
                StoredStatus::Completed,
                "interrupted after {budget} writes"
            );
            // A plain tool and a gated one never ran twice.
            assert!(
                effects.of("call_1").len() <= 1,
                "notify ran twice (budget {budget})"
            );
            assert!(
                effects.of("call_3").len() <= 1,
                "deploy ran twice (budget {budget})"
            );
            // The idempotent one ran at least once, every run with one key.
            let keys = effects.of("call_2");
            assert!(!keys.is_empty(), "sync never ran (budget {budget})");
            assert!(
                keys.windows(2).all(|w| w[0] == w[1]),
                "sync saw two keys (budget {budget})"
            );
        }
    });
}

#[test]
fn a_call_in_doubt_waits_for_a_person_and_a_retry_is_a_new_attempt() {
    block(async {
        let effects = Effects::default();
        let memory = Arc::new(MemoryStore::new());
        // started (1), the turn with notify's start (2): the process dies after the tool ran.
        let dying =
            Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), 2))).lease(DEAD_LEASE);
        let model = ScriptedModel::new()
            .tool_call("call_1", "notify", json!({}))
            .text("Sent.");
        let _ = dying
            .attach(release_agent(model.clone(), &effects))
            .run("Notify")
            .run_id("r")
            .await;
        tokio::time::sleep(DEAD_LEASE * 2).await;
        assert_eq!(effects.of("call_1").len(), 1);

        let runs = Runs::from_arc(memory.clone());
        let agent = runs.attach(release_agent(model, &effects));
        assert_eq!(runs.load("r").await.unwrap().status, StoredStatus::Running);
        let recovered = agent.recover("r").await.unwrap();
        assert_eq!(recovered.pending()[0].kind, PendingKind::OutcomeUnknown);
        assert_eq!(
            effects.of("call_1").len(),
            1,
            "recovery ran a non-idempotent call again"
        );
        let stored = runs.load("r").await.unwrap();
        assert_eq!(stored.status, StoredStatus::InDoubt);
        assert_eq!(stored.pending[0].kind, "outcome_unknown");
        let in_doubt = PendingFilter {
            kind: Some("outcome_unknown".into()),
            ..PendingFilter::default()
        };
        assert_eq!(runs.pending(&in_doubt).await.unwrap().items.len(), 1);
        // Recovering again is refused: the run is not running.
        assert!(agent.recover("r").await.is_err());

        // What a person checks with: the key of the attempt that was in flight, and when it
        // started.
        let waiting = &stored.state.pending()[0];
        assert_eq!(waiting.attempt, 0);
        assert_eq!(
            stored.state.idempotency_key("call_1", 0),
            effects.of("call_1")[0],
            "the key shown is the one the tool saw"
        );
        assert!(waiting.started_at_ms.is_some(), "no start time recorded");

        // An approval, on any path, is refused before anything is recorded: one click must not
        // repeat a side effect that may have happened.
        for approval in [
            Decision::Approve,
            Decision::ApproveAlways,
            Decision::ApproveWithArguments {
                arguments: json!({}),
            },
        ] {
            let refused = agent
                .resume("r")
                .decisions(Decisions::for_run("r").decide("call_1", approval.clone()))
                .at(stored.version)
                .by("ops")
                .await
                .unwrap_err();
            assert!(
                matches!(refused.error, AgentError::DecisionMismatch { .. }),
                "{approval:?}: {}",
                refused.error
            );
            let row = stored.pending[0].clone();
            let refused = runs
                .decide(&row, approval.clone(), "ops")
                .await
                .unwrap_err();
            assert!(
                matches!(refused, AgentError::DecisionMismatch { .. }),
                "{approval:?}: {refused}"
            );
            let plain = agent
                .agent()
                .resume(
                    &stored.state,
                    Decisions::for_run("r").decide("call_1", approval),
                )
                .await
                .unwrap_err();
            assert!(matches!(plain.error, AgentError::DecisionMismatch { .. }));
        }
        assert_eq!(runs.load("r").await.unwrap().version, stored.version);
        assert!(
            runs.audit(&AuditFilter::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "a refused approval was audited"
        );
        assert_eq!(effects.of("call_1").len(), 1);

        // A person checked that it did not happen and runs it again: a new attempt, a new key,
        // audited as its own action.
        let done = agent
            .resume("r")
            .decisions(Decisions::for_run("r").rerun_after_doubt("call_1"))
            .at(stored.version)
            .by("ops")
            .await
            .unwrap();
        assert_eq!(done.output(), Some("Sent."));
        let keys = effects.of("call_1");
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        assert_eq!(keys[1], done.state.idempotency_key("call_1", 1));
        let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].decision, r#"{"decision":"rerun_after_doubt"}"#);
    });
}

/// `RerunAfterDoubt` is for calls in doubt only: on a call that waits for approval it is refused.
#[test]
fn a_rerun_is_refused_for_a_call_that_is_not_in_doubt() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .tool_call("call_1", "deploy", json!({}))
            .text("Deployed.");
        let agent = release_agent(model, &effects);
        let paused = agent.run("Deploy").await.unwrap();
        let refused = agent
            .resume(&paused.state, Decisions::new().rerun_after_doubt("call_1"))
            .await
            .unwrap_err();
        assert!(
            matches!(refused.error, AgentError::DecisionMismatch { .. }),
            "{}",
            refused.error
        );
        assert!(effects.of("call_1").is_empty());
    });
}

/// An idempotency key names one side effect: the same run id made again (in another store,
/// after a prune) gives other keys; a run moved with `Runs::save` keeps its keys.
#[test]
fn idempotency_keys_differ_for_a_run_id_made_again_and_survive_a_save() {
    block(async {
        let effects = Effects::default();
        let model = || {
            ScriptedModel::new()
                .tool_call("call_1", "notify", json!({}))
                .text("Sent.")
        };
        let first = Runs::new(MemoryStore::new());
        let second = Runs::new(MemoryStore::new());
        for runs in [&first, &second] {
            runs.attach(release_agent(model(), &effects))
                .run("Notify")
                .run_id("same-id")
                .await
                .unwrap();
        }
        let keys = effects.of("call_1");
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1], "one key for two side effects");

        // Moved to a third store: the same run, the same keys.
        let state = first.load("same-id").await.unwrap().state;
        let third = Runs::new(MemoryStore::new());
        third.save(&state).await.unwrap();
        let moved = third.load("same-id").await.unwrap().state;
        assert_eq!(moved.idempotency_key("call_1", 0), keys[0]);
    });
}

#[test]
fn retention_prunes_finished_runs_only() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .text("Hello.")
            .tool_call("call_1", "deploy", json!({}));
        let runs = Runs::new(MemoryStore::new());
        let agent = runs.attach(release_agent(model, &effects));
        agent.run("Hi").run_id("done").await.unwrap();
        agent.run("Deploy").run_id("paused").await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let pruned = runs.prune(Duration::ZERO).await.unwrap();
        assert_eq!(pruned, 1);
        assert!(runs.load("done").await.is_err());
        assert_eq!(
            runs.load("paused").await.unwrap().status,
            StoredStatus::Paused
        );
        let all = runs.runs(&RunFilter::default()).await.unwrap();
        assert_eq!(all.items.len(), 1);
    });
}

#[test]
fn a_signed_state_stays_signed_in_the_store() {
    block(async {
        let effects = Effects::default();
        let model = ScriptedModel::new()
            .tool_call("call_1", "deploy", json!({}))
            .text("Done.");
        let runs = Runs::new(MemoryStore::new());
        let agent = Agent::builder("release")
            .model(model)
            .tool(effect_tool("deploy", &effects).require_approval())
            .state_key(b"a key of at least thirty-two bytes!!")
            .build()
            .unwrap();
        let agent = runs.attach(agent);
        let paused = agent.run("Deploy").await.unwrap();
        let stored = runs.load(paused.state.run_id()).await.unwrap();
        assert!(stored.state.is_signed());
        assert_eq!(stored.state.to_json(), paused.state.to_json());
    });
}

fn any_turn() -> impl Strategy<Value = Vec<(u8, u8)>> {
    // Each call: which tool (0 notify, 1 sync, 2 deploy), and an argument.
    prop::collection::vec((0u8..3, any::<u8>()), 0..4)
}

/// Runs the agent a generated script describes on `runs`, deciding every pause, and checks at
/// every pause and at the end that the run loaded from the store is the state the loop returned,
/// byte for byte.
async fn loaded_is_returned(runs: Runs, turns: &[Vec<(u8, u8)>]) -> Result<(), TestCaseError> {
    let effects = Effects::default();
    let mut model = ScriptedModel::new();
    let mut n = 0;
    for turn in turns.iter().filter(|t| !t.is_empty()) {
        let calls: Vec<ToolCall> = turn
            .iter()
            .map(|(tool, arg)| {
                n += 1;
                let name = ["notify", "sync", "deploy"][*tool as usize];
                let text = "x".repeat(*arg as usize % 7);
                ToolCall::new(format!("call_{n}"), name, json!({"n": arg, "text": text}))
            })
            .collect();
        model = model.tool_calls(calls);
    }
    let agent = runs.attach(release_agent(model.text("The end."), &effects));
    let mut result = agent.run("Go").await.unwrap();
    let run_id = result.state.run_id().to_owned();
    loop {
        let stored = runs.load(&run_id).await.unwrap();
        prop_assert_eq!(stored.state.to_json(), result.state.to_json());
        if !result.is_paused() {
            return Ok(());
        }
        let mut decisions = Decisions::for_run(&run_id);
        for (i, p) in result.pending().iter().enumerate() {
            decisions = if i % 2 == 0 {
                decisions.approve(&p.call.id)
            } else {
                decisions.reject(&p.call.id, "no")
            };
        }
        result = agent
            .resume(&run_id)
            .decisions(decisions)
            .at(stored.version)
            .by("p")
            .await
            .unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Whatever the run, the run loaded from the store is the state the loop returned, byte for
    /// byte, at every pause and at the end, whatever the snapshot interval.
    #[test]
    fn a_loaded_run_is_the_loops_state(turns in prop::collection::vec(any_turn(), 1..6), every in 1u32..5) {
        block(loaded_is_returned(Runs::new(MemoryStore::new()).snapshot_every(every), &turns))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]

    /// The same on SQLite: the bytes a database returns replay to the same state.
    #[test]
    fn a_run_loaded_from_sqlite_is_the_loops_state(turns in prop::collection::vec(any_turn(), 1..6), every in 1u32..5) {
        // A file per case: a pool's connections may outlive its case for a moment.
        static CASE: AtomicUsize = AtomicUsize::new(0);
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("phaseo-prop-sqlite-{}-{case}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let result = block(async {
            let store = SqliteStore::builder(dir.join("runs.db")).power_safe(false).open().await.unwrap();
            loaded_is_returned(Runs::new(store).snapshot_every(every), &turns).await
        });
        let _ = std::fs::remove_dir_all(&dir);
        result?;
    }
}

/// The bytes a run's journal holds, entries and snapshot together.
#[test]
fn bytes_per_step_do_not_grow_with_the_run() {
    block(async {
        let effects = Effects::default();
        let memory = Arc::new(MemoryStore::new());
        let mut model = ScriptedModel::new();
        for i in 0..200 {
            model = model.tool_call(
                &format!("call_{i}"),
                "notify",
                json!({"text": "y".repeat(150)}),
            );
        }
        let agent_model = model.text("Done.");
        let runs = Runs::from_arc(memory.clone());
        let agent = Agent::builder("long")
            .model(agent_model)
            .tool(effect_tool("notify", &effects))
            .max_turns(1000)
            .build()
            .unwrap();
        runs.attach(agent).run("Go").run_id("long").await.unwrap();
        let loaded = memory.load("long").await.unwrap();
        let per_entry: Vec<usize> = loaded.rows.iter().map(|r| r.body.len()).collect();
        let biggest = per_entry.iter().max().copied().unwrap_or(0);
        // Every entry is about one step's size, at step 200 as at step 1.
        assert!(biggest < 2_000, "an entry of {biggest} bytes");
    });
}

/// What a damaged store does to a run's rows.
type Damage = fn(&mut LoadedRun);

/// Each kind of damage gives a typed error naming the damaged run, and the other run still loads
/// and resumes.
#[test]
fn a_damaged_run_is_refused_by_name_and_the_others_are_served() {
    let cases: [(Damage, &str); 7] = [
        (
            |l| l.rows[1].body = l.rows[1].body.replace("deploy", "delete"),
            "checksum",
        ),
        (
            |l| {
                let n = l.rows[1].body.len() / 2;
                l.rows[1].body.truncate(n)
            },
            "checksum",
        ),
        (
            |l| {
                l.rows.remove(1);
            },
            "missing or repeated",
        ),
        (
            |l| {
                let row = l.rows[1].clone();
                l.rows.insert(1, row)
            },
            "missing or repeated",
        ),
        (|l| l.rows[0].format = 99, "format 99"),
        (
            |l| {
                l.rows.pop();
            },
            "ends at version",
        ),
        (
            |l| {
                if let Some(s) = l.snapshot.as_mut() {
                    s.body.push(' ')
                } else {
                    l.rows[0].digest = "0".repeat(64)
                }
            },
            "checksum",
        ),
    ];
    block(async {
        for (damage, says) in cases {
            let effects = Effects::default();
            let memory = Arc::new(MemoryStore::new());
            let damaged = Hooked::new(memory.clone()).on_load(move |loaded| {
                if loaded.run_id == "bad" {
                    damage(loaded)
                }
            });
            let runs = Runs::without_queue(Arc::new(damaged));
            let model = || {
                ScriptedModel::new()
                    .tool_call("call_1", "deploy", json!({}))
                    .text("Done.")
            };
            runs.attach(release_agent(model(), &effects))
                .run("Deploy")
                .run_id("bad")
                .await
                .unwrap();
            let good_agent = runs.attach(release_agent(model(), &effects));
            good_agent.run("Deploy").run_id("good").await.unwrap();

            let error = runs.load("bad").await.unwrap_err();
            let AgentError::Store(error) = error else {
                panic!("not a store error: {error}")
            };
            match &error {
                StoreError::Corrupt { run_id, .. }
                | StoreError::UnsupportedFormat { run_id, .. } => {
                    assert_eq!(run_id, "bad")
                }
                other => panic!("expected a typed damage error, got {other:?}"),
            }
            assert!(
                error.to_string().contains(says),
                "{error} (expected {says:?})"
            );
            // Resuming it is refused the same way, and nothing runs.
            let refused = good_agent
                .resume("bad")
                .decisions(Decisions::for_run("bad").approve("call_1"))
                .at(5)
                .by("ada")
                .await
                .unwrap_err();
            assert!(
                matches!(refused.error, AgentError::Store(_)),
                "{}",
                refused.error
            );
            assert_eq!(effects.count(), 0);
            // The other run is served.
            let version = runs.load("good").await.unwrap().version;
            let done = good_agent
                .resume("good")
                .decisions(Decisions::for_run("good").approve("call_1"))
                .at(version)
                .by("ada")
                .await
                .unwrap();
            assert_eq!(done.output(), Some("Done."));
        }
    });
}

/// A call a person approved with edited arguments, interrupted after it started: an idempotent
/// tool runs again with the arguments the person gave, not the model's.
#[test]
fn an_edited_call_in_doubt_runs_again_as_edited() {
    block(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let agent = |seen: &Arc<Mutex<Vec<String>>>| {
            let seen = seen.clone();
            let scale = Tool::new(
                "scale",
                "Scale",
                json!({"type": "object"}),
                move |input, _| {
                    seen.lock().unwrap().push(input["replicas"].to_string());
                    Ok(json!({"scaled": true}))
                },
            )
            .idempotent(true)
            .require_approval();
            let model = ByPosition(vec![
                ModelResponse::tool_calls([ToolCall::new(
                    "call_1",
                    "scale",
                    json!({"replicas": 9}),
                )]),
                ModelResponse::text("Scaled."),
            ]);
            Agent::builder("ops")
                .model(model)
                .tool(scale)
                .build()
                .unwrap()
        };
        let memory = Arc::new(MemoryStore::new());
        let runs = Runs::from_arc(memory.clone());
        runs.attach(agent(&seen))
            .run("Scale")
            .run_id("r")
            .await
            .unwrap();
        let version = runs.load("r").await.unwrap().version;
        // The resume takes its lease, writes its decision and the call's start, then dies
        // before the call's result is written.
        let dying =
            Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), 3))).lease(DEAD_LEASE);
        let edited =
            Decisions::for_run("r").approve_with_arguments("call_1", json!({"replicas": 3}));
        let _ = dying
            .attach(agent(&seen))
            .resume("r")
            .decisions(edited)
            .at(version)
            .by("ada")
            .await;
        assert_eq!(*seen.lock().unwrap(), ["3"]);
        tokio::time::sleep(DEAD_LEASE * 2).await;
        let done = runs.attach(agent(&seen)).recover("r").await.unwrap();
        assert_eq!(done.output(), Some("Scaled."));
        assert_eq!(
            *seen.lock().unwrap(),
            ["3", "3"],
            "the recovery ran the model's arguments"
        );
    });
}

/// Two people decide one call at the same moment (both read the same version, both write): one
/// decision is recorded, and the other is told who decided, not that a version moved on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loser_of_a_decide_race_is_told_who_decided() {
    let effects = Effects::default();
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({}))
        .text("Deployed.");
    let memory = Arc::new(MemoryStore::new());
    Runs::from_arc(memory.clone())
        .attach(release_agent(model, &effects))
        .run("Deploy")
        .run_id("r")
        .await
        .unwrap();
    // Each decider's write waits for the other's: both have read the run by then.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let decider = |name: &'static str| {
        let barrier = barrier.clone();
        let runs = Runs::without_queue(Arc::new(Hooked::new(memory.clone()).before_write(
            move |_| {
                barrier.wait();
                Ok(())
            },
        )));
        tokio::spawn(async move {
            let row = runs.load("r").await.unwrap().pending[0].clone();
            (name, runs.decide(&row, Decision::Approve, name).await)
        })
    };
    let (ada, bob) = (decider("ada"), decider("bob"));
    let outcomes = [ada.await.unwrap(), bob.await.unwrap()];
    let won: Vec<_> = outcomes.iter().filter(|(_, r)| r.is_ok()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    let winner = won[0].0;
    let (_, lost) = outcomes.iter().find(|(_, r)| r.is_err()).unwrap();
    match lost {
        Err(AgentError::Store(StoreError::StaleDecision { reason, .. })) => assert!(
            reason.contains(&format!("already decided by {winner}")),
            "{reason}"
        ),
        other => panic!("the loser got {other:?}"),
    }
}

/// A waiting call's row edited in the database (its arguments, with a digest to match) is refused
/// as damage when the run is loaded, naming the row's version, and no decision is recorded on it;
/// the other run loads.
#[test]
fn a_waiting_row_edited_in_the_database_is_refused_never_decided() {
    block(async {
        let effects = Effects::default();
        let memory = Arc::new(MemoryStore::new());
        for run_id in ["edited", "intact"] {
            let model = ScriptedModel::new()
                .tool_call("call_1", "deploy", json!({"env": "staging"}))
                .text("Deployed.");
            Runs::from_arc(memory.clone())
                .attach(release_agent(model, &effects))
                .run("Deploy")
                .run_id(run_id)
                .await
                .unwrap();
        }
        let edited_arguments = r#"{"env":"production"}"#;
        let digest = |text: &str| {
            // The digest the store keeps: SHA-256 of the arguments' text, as hex.
            use sha2::Digest as _;
            sha2::Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let intact = Runs::from_arc(memory.clone()).load("edited").await.unwrap();
        assert_eq!(
            intact.pending[0].digest,
            digest(&intact.pending[0].arguments),
            "the test's digest is the store's"
        );
        let row_version = intact.pending[0].version;
        let forged = digest(edited_arguments);
        let tampered = Runs::without_queue(Arc::new(Hooked::new(memory.clone()).on_load(
            move |loaded| {
                if loaded.run_id == "edited" {
                    loaded.pending[0].arguments = edited_arguments.to_owned();
                    loaded.pending[0].digest = forged.clone();
                }
            },
        )));
        match tampered.load("edited").await {
            Err(AgentError::Store(StoreError::Corrupt {
                run_id, version, ..
            })) => {
                assert_eq!(run_id, "edited");
                assert_eq!(version, row_version);
            }
            other => panic!("a tampered row loaded: {other:?}"),
        }
        let mut shown = intact.pending[0].clone();
        shown.arguments = edited_arguments.to_owned();
        shown.digest = digest(edited_arguments);
        assert!(
            tampered
                .decide(&shown, Decision::Approve, "ada")
                .await
                .is_err()
        );
        assert!(tampered.load("intact").await.is_ok(), "the other run loads");
        let runs = Runs::from_arc(memory.clone());
        assert!(
            runs.audit(&AuditFilter::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "a decision on a tampered row was recorded"
        );
        assert!(effects.of("call_1").is_empty());
    });
}

/// A waiting row whose arguments were changed in the database without its digest is left out of
/// the listing's items and named in its `damaged`; the other runs' rows are listed.
#[test]
fn a_listing_names_a_row_whose_digest_does_not_match() {
    use sqlx::{AssertSqlSafe, ConnectOptions, Connection};
    block(async {
        let dir = crate::durable_processes::scratch("edited-row");
        let path = dir.join("runs.db");
        let runs = Runs::new(SqliteStore::open(&path).await.unwrap());
        let effects = Effects::default();
        for run_id in ["edited", "intact"] {
            let model = ScriptedModel::new()
                .tool_call("call_1", "deploy", json!({"env": "staging"}))
                .text("Deployed.");
            runs.attach(release_agent(model, &effects))
                .run("Deploy")
                .run_id(run_id)
                .await
                .unwrap();
        }
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .connect()
            .await
            .unwrap();
        sqlx::raw_sql(AssertSqlSafe(
            "UPDATE phaseo_pending SET arguments = '{\"env\":\"production\"}' \
             WHERE run_id = 'edited'",
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        // Listed again and again (the inbox polls), the damaged row is logged at warn once.
        let warned = Arc::new(AtomicUsize::new(0));
        let _logs = {
            use tracing_subscriber::layer::SubscriberExt as _;
            tracing::subscriber::set_default(
                tracing_subscriber::registry().with(CountWarnings(warned.clone())),
            )
        };
        for _ in 0..3 {
            runs.pending(&PendingFilter::default()).await.unwrap();
        }
        assert_eq!(
            warned.load(Ordering::SeqCst),
            1,
            "logged once, not at every listing"
        );
        let page = runs.pending(&PendingFilter::default()).await.unwrap();
        let listed: Vec<&str> = page.items.iter().map(|row| row.run_id.as_str()).collect();
        assert_eq!(listed, ["intact"]);
        assert_eq!(page.damaged.len(), 1);
        assert_eq!(page.damaged[0].run_id, "edited");
        assert_eq!(page.damaged[0].call_id.as_deref(), Some("call_1"));
        assert!(page.damaged[0].reason.contains("digest"));
        assert!(matches!(
            runs.load("edited").await,
            Err(AgentError::Store(StoreError::Corrupt { .. }))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// A failed run is retried under its own id, once per version read, and its failure is stored
/// until then; a retry whose process dies before the model's answer is recorded is taken up by a
/// recovery and completes, and the call that finished before the failure never runs again.
#[test]
fn a_failed_run_is_retried_once_and_a_dead_retry_is_taken_up() {
    block(async {
        let effects = Effects::default();
        let memory = Arc::new(MemoryStore::new());
        let runs = Runs::from_arc(memory.clone());
        let model = ScriptedModel::new()
            .tool_call("call_1", "notify", json!({}))
            .error(phaseo_agent::ModelError::other("the model is down"))
            .text("Sent.")
            .text("Sent.");
        let agent = runs.attach(release_agent(model.clone(), &effects));
        assert!(agent.run("Notify").run_id("r").await.is_err());
        let failed = runs.load("r").await.unwrap();
        assert_eq!(failed.status, StoredStatus::Failed);
        assert!(
            failed
                .failure
                .as_deref()
                .unwrap()
                .contains("the model is down"),
            "{:?}",
            failed.failure
        );
        // A retry of a run that is not failed, or of another version, is refused.
        let refused = agent
            .retry("r")
            .at(failed.version + 1)
            .by("ada")
            .await
            .unwrap_err();
        assert!(matches!(
            refused.error,
            AgentError::Store(StoreError::Conflict { .. })
        ));

        // The retry takes the run (its lease, then `retried`), and its process dies before the
        // model's answer is written.
        let dying =
            Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), 2))).lease(DEAD_LEASE);
        let _ = dying
            .attach(release_agent(model.clone(), &effects))
            .retry("r")
            .at(failed.version)
            .by("ada")
            .await;
        let taken = runs.load("r").await.unwrap();
        assert_eq!(taken.status, StoredStatus::Running);
        assert_eq!(taken.failure, None);
        // The same version again: the run moved on.
        let again = agent
            .retry("r")
            .at(failed.version)
            .by("bob")
            .await
            .unwrap_err();
        assert!(matches!(
            again.error,
            AgentError::Store(StoreError::Conflict { .. } | StoreError::LeaseHeld { .. })
        ));
        tokio::time::sleep(DEAD_LEASE * 2).await;
        let done = agent.recover("r").await.unwrap();
        assert_eq!(done.output(), Some("Sent."));
        assert_eq!(effects.of("call_1").len(), 1, "the finished call ran once");
        let wrong = agent
            .retry("r")
            .at(done_version(&runs).await)
            .by("ada")
            .await;
        assert!(matches!(
            wrong.unwrap_err().error,
            AgentError::Store(StoreError::WrongStatus { .. })
        ));
    });
}

async fn done_version(runs: &Runs) -> u64 {
    runs.load("r").await.unwrap().version
}

/// A model turn and the starts of the calls it plans share one commit: a run of `t` tool turns
/// of `c` calls (each running) costs at most `t(1 + c) + 2` commits — the turn with its starts,
/// each call's result, the run's creation and its end — and its journal replays to the state the
/// loop left.
#[test]
fn a_turn_and_its_calls_starts_are_one_commit() {
    block(async {
        for (turns, calls) in [(1, 1), (20, 1), (5, 4), (4, 5), (2, 10)] {
            let mut script: Vec<ModelResponse> = (0..turns)
                .map(|i| {
                    ModelResponse::tool_calls((0..calls).map(|j| {
                        ToolCall::new(format!("call_{i}_{j}"), "notify", json!({"i": i, "j": j}))
                    }))
                })
                .collect();
            script.push(ModelResponse::text("Done."));
            let effects = Effects::default();
            let writes = Arc::new(AtomicUsize::new(0));
            let counted = writes.clone();
            let memory: Arc<dyn RunStore> = Arc::new(MemoryStore::new());
            let store = Hooked::new(memory.clone()).after_write(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            });
            let runs = Runs::without_queue(Arc::new(store));
            let agent = Agent::builder("release")
                .model(ByPosition(script))
                .tool(effect_tool("notify", &effects))
                .max_turns(100)
                .build()
                .unwrap();
            let done = runs.attach(agent).run("Go").await.unwrap();
            assert_eq!(done.status(), RunStatus::Completed);
            assert_eq!(effects.count(), turns * calls);
            let commits = writes.load(Ordering::SeqCst);
            assert_eq!(
                commits,
                turns * (1 + calls) + 2,
                "{turns} turns of {calls} calls"
            );
            let stored = runs.load(done.state.run_id()).await.unwrap();
            assert_eq!(stored.state.to_json(), done.state.to_json());
            assert_eq!(
                stored.version,
                (turns * (1 + 2 * calls) + 2) as u64,
                "every entry kept, one version each"
            );
        }
    });
}
