//! `DurableAgent`'s verbs as requests: each of `resume`, `retry` and `recover` awaited and
//! streamed, the stream ending with the result awaiting gives; `.at`, `.by` and `.decisions` as
//! settings; decisions without who made them refused before anything is written.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use phaseo_agent::durable::{DurableAgent, Runs};
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{AuditFilter, MemoryStore, PendingFilter, StoredStatus};
use phaseo_agent::{
    Agent, AgentError, AgentErrorKind, Decision, Decisions, Event, EventStream, ModelError,
    RunError, RunResult, ScriptedModel, StoreError, Tool,
};

use crate::support::durable::Hooked;

fn block<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A run that pauses on `deploy` (needs approval), then answers "Deployed.".
fn release(runs: &Runs) -> DurableAgent {
    let deploy =
        Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    // Idempotent: its call, started when the process died, runs again on recovery.
    let notify =
        Tool::new("notify", "Notify", json!({"type": "object"}), |v, _| Ok(v)).idempotent(true);
    let model = ScriptedModel::new()
        .tool_call("call_1", "deploy", json!({"env": "staging"}))
        .text("Deployed.");
    runs.attach(
        Agent::builder("release")
            .model(model)
            .tool(deploy)
            .tool(notify)
            .build()
            .unwrap(),
    )
}

/// A paused run `r` in a fresh store.
async fn paused() -> (Runs, DurableAgent) {
    let runs = Runs::new(MemoryStore::new());
    let agent = release(&runs);
    agent.run("Deploy").run_id("r").await.unwrap();
    (runs, agent)
}

/// What a result says, in the terms a stream's last event gives it: the event's name, the output,
/// the number of turns, and the calls still waiting.
fn said(
    result: &Result<RunResult, RunError>,
) -> (&'static str, Option<String>, usize, Vec<String>) {
    match result {
        Ok(done) => {
            let waiting: Vec<String> = done.pending().iter().map(|p| p.call.id.clone()).collect();
            let name = if waiting.is_empty() {
                "run.completed"
            } else {
                "run.paused"
            };
            let turns = done.state.turns();
            (name, done.output().map(str::to_owned), turns, waiting)
        }
        Err(error) if error.state.is_none() => ("run.refused", None, 0, Vec::new()),
        Err(error) => (
            "run.failed",
            None,
            error.state.as_ref().unwrap().turns(),
            Vec::new(),
        ),
    }
}

/// The same, from a stream's last event.
fn told(events: &[Event]) -> (&'static str, Option<String>, usize, Vec<String>) {
    let last = events.last().expect("a stream has a last event");
    match last {
        Event::Completed { output, state, .. } => (
            "run.completed",
            Some(output.clone()),
            state.turns(),
            Vec::new(),
        ),
        Event::Paused { state, .. } => (
            "run.paused",
            None,
            state.turns(),
            state.pending().iter().map(|p| p.call.id.clone()).collect(),
        ),
        Event::Failed { state, .. } => ("run.failed", None, state.turns(), Vec::new()),
        Event::Refused { .. } => ("run.refused", None, 0, Vec::new()),
        other => panic!("a stream ended with {}", other.name()),
    }
}

async fn collect(stream: EventStream) -> Vec<Event> {
    stream.collect().await
}

#[test]
fn a_resume_with_decisions_awaited_and_streamed_ends_the_same() {
    block(async {
        let (runs_a, awaited_agent) = paused().await;
        let (runs_s, streamed_agent) = paused().await;
        let version = runs_a.load("r").await.unwrap().version;
        assert_eq!(version, runs_s.load("r").await.unwrap().version);

        let awaited = awaited_agent
            .resume("r")
            .decisions(Decisions::new().approve("call_1"))
            .at(version)
            .by("ada")
            .await;
        let events = collect(
            streamed_agent
                .resume("r")
                .decisions(Decisions::new().approve("call_1"))
                .at(version)
                .by("ada")
                .stream(),
        )
        .await;
        let names: Vec<&str> = events.iter().map(Event::name).collect();
        assert_eq!(
            names,
            [
                "run.started",
                "tool.called",
                "tool.result",
                "model.turn",
                "run.completed"
            ]
        );
        assert_eq!(said(&awaited), told(&events));
        assert_eq!(awaited.unwrap().output(), Some("Deployed."));
        // Both journaled the same way, with who decided in the audit log.
        for runs in [&runs_a, &runs_s] {
            assert_eq!(
                runs.load("r").await.unwrap().status,
                StoredStatus::Completed
            );
            let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
            assert_eq!(audit.len(), 1);
            assert_eq!((audit[0].by.as_str(), audit[0].version), ("ada", version));
        }
    });
}

#[test]
fn a_resume_with_recorded_decisions_awaited_and_streamed_ends_the_same() {
    block(async {
        let (runs_a, awaited_agent) = paused().await;
        let (runs_s, streamed_agent) = paused().await;
        for runs in [&runs_a, &runs_s] {
            let row = runs.pending(&PendingFilter::default()).await.unwrap().items;
            runs.decide(&row[0], Decision::Approve, "ada")
                .await
                .unwrap();
        }
        let awaited = awaited_agent.resume("r").await;
        let events = collect(streamed_agent.resume("r").stream()).await;
        assert_eq!(events[0].name(), "run.started");
        assert_eq!(said(&awaited), told(&events));
        assert_eq!(said(&awaited).1.as_deref(), Some("Deployed."));
        // Nothing more is recorded in the audit log: the decision was there already.
        for runs in [&runs_a, &runs_s] {
            let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
            assert_eq!(audit.len(), 1);
        }
    });
}

#[test]
fn decisions_without_who_made_them_are_refused_and_nothing_is_written() {
    block(async {
        let (runs, agent) = paused().await;
        let before = runs.load("r").await.unwrap().version;
        let approve = || Decisions::new().approve("call_1");

        let refused = agent.resume("r").decisions(approve()).await.unwrap_err();
        assert!(
            matches!(&refused.error, AgentError::UnattributedDecisions { run_id } if run_id == "r"),
            "{:?}",
            refused.error
        );
        assert!(refused.state.is_none());
        assert_eq!(
            refused.error.to_string(),
            "decisions for run `r` name nobody who made them"
        );
        // An empty name, or one of spaces, names nobody either.
        for nobody in ["", "  "] {
            let refused = agent
                .resume("r")
                .decisions(approve())
                .by(nobody)
                .await
                .unwrap_err();
            assert_eq!(refused.error.kind(), AgentErrorKind::UnattributedDecisions);
        }
        // Streamed: one `run.refused`, with the stored state, unchanged.
        let events = collect(agent.resume("r").decisions(approve()).stream()).await;
        let [Event::Refused { kind, state, .. }] = &events[..] else {
            panic!("{events:?}")
        };
        assert_eq!(*kind, AgentErrorKind::UnattributedDecisions);
        assert_eq!(state.run_id(), "r");

        let stored = runs.load("r").await.unwrap();
        assert_eq!(stored.version, before, "a refused resume wrote");
        assert_eq!(stored.status, StoredStatus::Paused);
        assert!(
            runs.audit(&AuditFilter::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        // Named, the same decisions resume it.
        let done = agent.resume("r").decisions(approve()).by("ada").await;
        assert_eq!(done.unwrap().output(), Some("Deployed."));
    });
}

#[test]
fn a_resume_at_a_stale_version_is_a_conflict_awaited_and_streamed() {
    block(async {
        let (runs, agent) = paused().await;
        let read = runs.load("r").await.unwrap().version;
        let approve = || Decisions::new().approve("call_1");
        let stale = agent
            .resume("r")
            .decisions(approve())
            .at(read + 1)
            .by("ada")
            .await
            .unwrap_err();
        assert!(matches!(
            stale.error,
            AgentError::Store(StoreError::Conflict { expected, found, .. }) if expected == read + 1 && found == read
        ));
        let events = collect(
            agent
                .resume("r")
                .decisions(approve())
                .at(read + 1)
                .by("ada")
                .stream(),
        )
        .await;
        let [Event::Refused { kind, error, .. }] = &events[..] else {
            panic!("{events:?}")
        };
        assert_eq!(*kind, AgentErrorKind::Store);
        assert_eq!(*error, stale.error.to_string());

        // The first resumer of `read` wins; a second one of the same version is refused, and
        // runs nothing, however it is asked.
        agent
            .resume("r")
            .decisions(approve())
            .at(read)
            .by("ada")
            .await
            .unwrap();
        let second = collect(
            agent
                .resume("r")
                .decisions(approve())
                .at(read)
                .by("bob")
                .stream(),
        )
        .await;
        assert!(
            matches!(
                &second[..],
                [Event::Refused {
                    kind: AgentErrorKind::Store,
                    ..
                }]
            ),
            "{second:?}"
        );
        let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].by, "ada");
    });
}

#[test]
fn a_resume_without_a_version_takes_the_current_one() {
    block(async {
        let (runs, agent) = paused().await;
        let current = runs.load("r").await.unwrap().version;
        let done = agent
            .resume("r")
            .decisions(Decisions::new().approve("call_1"))
            .by("ada")
            .await
            .unwrap();
        assert_eq!(done.output(), Some("Deployed."));
        let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
        assert_eq!(audit[0].version, current);
        // Once done, a resume of the current version is refused: the run is not paused.
        let again = agent
            .resume("r")
            .decisions(Decisions::new().approve("call_1"))
            .by("ada")
            .await
            .unwrap_err();
        assert!(matches!(
            again.error,
            AgentError::Store(StoreError::WrongStatus { .. })
        ));
    });
}

/// A failed run `r` in a fresh store: the model fails once, then answers "Back.".
async fn failed() -> (Runs, DurableAgent) {
    let runs = Runs::new(MemoryStore::new());
    let model = ScriptedModel::new()
        .error(ModelError::other("down"))
        .text("Back.");
    let agent = runs.attach(Agent::builder("chat").model(model).build().unwrap());
    assert!(agent.run("Hello").run_id("r").await.is_err());
    assert_eq!(runs.load("r").await.unwrap().status, StoredStatus::Failed);
    (runs, agent)
}

#[test]
fn a_retry_awaited_and_streamed_ends_the_same() {
    block(async {
        let (runs_a, awaited_agent) = failed().await;
        let (runs_s, streamed_agent) = failed().await;
        let version = runs_a.load("r").await.unwrap().version;

        let awaited = awaited_agent.retry("r").at(version).by("ada").await;
        let events = collect(streamed_agent.retry("r").at(version).by("ada").stream()).await;
        let names: Vec<&str> = events.iter().map(Event::name).collect();
        assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
        assert_eq!(said(&awaited), told(&events));
        assert_eq!(said(&awaited).1.as_deref(), Some("Back."));
        for runs in [&runs_a, &runs_s] {
            assert_eq!(
                runs.load("r").await.unwrap().status,
                StoredStatus::Completed
            );
        }
        // A second retry of the version read is refused: awaited or streamed.
        let again = awaited_agent
            .retry("r")
            .at(version)
            .by("bob")
            .await
            .unwrap_err();
        assert!(matches!(
            again.error,
            AgentError::Store(StoreError::Conflict { .. })
        ));
        let again = collect(streamed_agent.retry("r").at(version).by("bob").stream()).await;
        assert!(
            matches!(
                &again[..],
                [Event::Refused {
                    kind: AgentErrorKind::Store,
                    ..
                }]
            ),
            "{again:?}"
        );
    });
}

#[test]
fn a_retry_without_a_version_or_a_name_takes_the_current_one_by_the_holder() {
    block(async {
        let runs = Runs::new(MemoryStore::new()).holder("replica-7");
        let model = ScriptedModel::new()
            .error(ModelError::other("down"))
            .text("Back.");
        let agent = runs.attach(Agent::builder("chat").model(model).build().unwrap());
        assert!(agent.run("Hello").run_id("r").await.is_err());
        let done = agent.retry("r").await.unwrap();
        assert_eq!(done.output(), Some("Back."));
        let journal = format!("{:?}", runs.store().load("r").await.unwrap());
        assert!(journal.contains("replica-7"), "{journal}");
    });
}

/// The lease of a process that dies in a test: short, so that the run can be taken up soon
/// after.
const DEAD_LEASE: Duration = Duration::from_millis(100);

/// A run `r` whose process died after its first model turn was written (with its call's start:
/// one commit), in `memory`. The model is shared with the caller's: the turn it gave is used up.
async fn abandoned(memory: &Arc<MemoryStore>, model: ScriptedModel) {
    let dying =
        Runs::without_queue(Arc::new(Hooked::dies_after(memory.clone(), 2))).lease(DEAD_LEASE);
    let _ = notifier(&dying, model).run("Notify").run_id("r").await;
    tokio::time::sleep(DEAD_LEASE * 2).await;
}

fn notifier(runs: &Runs, model: ScriptedModel) -> DurableAgent {
    // Idempotent: its call, started when the process died, runs again on recovery.
    let notify =
        Tool::new("notify", "Notify", json!({"type": "object"}), |v, _| Ok(v)).idempotent(true);
    runs.attach(
        Agent::builder("ops")
            .model(model)
            .tool(notify)
            .build()
            .unwrap(),
    )
}

#[test]
fn a_recovery_awaited_and_streamed_ends_the_same() {
    block(async {
        let model = || {
            ScriptedModel::new()
                .tool_call("call_1", "notify", json!({}))
                .text("Sent.")
        };
        let (memory_a, memory_s) = (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
        let (model_a, model_s) = (model(), model());
        abandoned(&memory_a, model_a.clone()).await;
        abandoned(&memory_s, model_s.clone()).await;
        let (runs_a, runs_s) = (Runs::from_arc(memory_a), Runs::from_arc(memory_s));
        for runs in [&runs_a, &runs_s] {
            assert_eq!(runs.load("r").await.unwrap().status, StoredStatus::Running);
        }
        // The model's first turn is in the journal: the recovered run asks it for the second.
        let awaited = notifier(&runs_a, model_a).recover("r").await;
        let events = collect(notifier(&runs_s, model_s).recover("r").stream()).await;
        assert_eq!(said(&awaited), told(&events));
        assert_eq!(said(&awaited).1.as_deref(), Some("Sent."));
        assert!(
            events.iter().any(|e| e.name() == "tool.result"),
            "{events:?}"
        );
        for runs in [&runs_a, &runs_s] {
            assert_eq!(
                runs.load("r").await.unwrap().status,
                StoredStatus::Completed
            );
        }
        // Done: recovering again is refused, awaited or streamed.
        let again = notifier(&runs_a, model()).recover("r").await.unwrap_err();
        assert!(matches!(
            again.error,
            AgentError::Store(StoreError::WrongStatus { .. })
        ));
        let again = collect(notifier(&runs_s, model()).recover("r").stream()).await;
        assert!(
            matches!(
                &again[..],
                [Event::Refused {
                    kind: AgentErrorKind::Store,
                    ..
                }]
            ),
            "{again:?}"
        );
    });
}

#[test]
fn a_run_that_cannot_be_loaded_is_refused_and_its_stream_ends_empty() {
    block(async {
        let runs = Runs::new(MemoryStore::new());
        let agent = release(&runs);
        let missing = agent.resume("nope").await.unwrap_err();
        assert!(matches!(
            missing.error,
            AgentError::Store(StoreError::NotFound { .. })
        ));
        assert!(collect(agent.resume("nope").stream()).await.is_empty());
        assert!(collect(agent.retry("nope").stream()).await.is_empty());
        assert!(collect(agent.recover("nope").stream()).await.is_empty());
    });
}
